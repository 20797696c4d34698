import unittest

from roman import to_roman

CASES = {
    1: "I",
    3: "III",
    4: "IV",
    9: "IX",
    14: "XIV",
    40: "XL",
    90: "XC",
    400: "CD",
    1994: "MCMXCIV",
    3999: "MMMCMXCIX",
}


class ToRomanTest(unittest.TestCase):
    def test_writes_roman_numerals(self):
        for number, expected in CASES.items():
            with self.subTest(number=number):
                self.assertEqual(to_roman(number), expected)

    def test_refuses_zero(self):
        with self.assertRaises(ValueError):
            to_roman(0)


if __name__ == "__main__":
    unittest.main()
