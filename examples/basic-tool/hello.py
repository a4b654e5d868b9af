"""
Minimal ToolDock tool example.
Drop this file into a folder under your tools directory and it works.
"""
from fastmcp.tools import tool


@tool
def say_hello(name: str = "World") -> str:
    """Greet someone by name.

    Args:
        name: The person to greet. Defaults to "World".

    Returns:
        A greeting string.
    """
    return f"Hello, {name}!"
