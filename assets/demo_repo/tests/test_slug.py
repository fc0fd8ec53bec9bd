import unittest

from textkit.slug import slugify


class SlugTest(unittest.TestCase):
    def test_words(self):
        self.assertEqual(slugify("Hello, World"), "hello-world")


if __name__ == "__main__":
    unittest.main()
