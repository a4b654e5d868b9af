"""
A second file in the same namespace: every file's tools are served together.
"""
from fastmcp.tools import tool


@tool
def reverse_text(text: str) -> str:
    """Reverse a string.

    Args:
        text: The text to reverse.

    Returns:
        The text, last character first.
    """
    return text[::-1]


@tool
def word_count(text: str) -> int:
    """Count the words in a text (separated by whitespace).

    Args:
        text: The text to count words in.

    Returns:
        The number of words.
    """
    return len(text.split())
