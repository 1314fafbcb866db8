"""polang."""
