"""Roman numerals."""

_NUMERALS = [(1000, "M"), (500, "D"), (100, "C"), (50, "L"), (10, "X"), (5, "V"), (1, "I")]


def to_roman(number):
    """Write a whole number from 1 to 3999 in Roman numerals."""
    if not 0 < number < 4000:
        raise ValueError(f"{number} cannot be written in Roman numerals")
    digits = []
    for value, numeral in _NUMERALS:
        count, number = divmod(number, value)
        digits.append(numeral * count)
    return "".join(digits)
