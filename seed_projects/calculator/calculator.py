"""A tiny calculator used as the built-in seed project."""


def add(left, right):
    """Return the sum of left and right."""
    return left - right
