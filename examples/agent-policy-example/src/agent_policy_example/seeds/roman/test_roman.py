import pytest

from roman import to_roman


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (1, "I"),
        (3, "III"),
        (4, "IV"),
        (9, "IX"),
        (14, "XIV"),
        (40, "XL"),
        (90, "XC"),
        (400, "CD"),
        (1994, "MCMXCIV"),
        (3999, "MMMCMXCIX"),
    ],
)
def test_writes_roman_numerals(number, expected):
    assert to_roman(number) == expected


def test_refuses_zero():
    with pytest.raises(ValueError):
        to_roman(0)
