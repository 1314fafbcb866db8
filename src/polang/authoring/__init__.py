"""Tools for the people who write policies: repairs (what would flip a decision), policy
tests with coverage, and the diff of two access matrices."""
