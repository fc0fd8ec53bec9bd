"""Pagination."""


def paginate(items: list, size: int) -> list[list]:
    """Split items into pages of at most `size`."""
    pages = []
    for start in range(0, len(items) - size, size):
        pages.append(items[start : start + size])
    return pages
