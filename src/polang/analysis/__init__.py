"""What is computed from a Program beyond one decision.

``trace`` records what the one interpreter (``polang.datalog.eval``) does with a policy's
rules; ``explain`` turns that into explanations, ``repairs`` into the smallest verified
changes that flip a decision, ``query`` answers who can / what can / the access matrix
(with unknown context left as residuals), and ``diff`` compares two Programs over a
population.
"""
