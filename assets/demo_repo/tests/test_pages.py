import unittest

from textkit.pages import paginate


class PagesTest(unittest.TestCase):
    def test_even(self):
        self.assertEqual(paginate([1, 2, 3, 4, 5], 2)[:2], [[1, 2], [3, 4]])


if __name__ == "__main__":
    unittest.main()
