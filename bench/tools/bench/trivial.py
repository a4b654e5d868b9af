from fastmcp.tools import tool


@tool
def echo_number(x: int) -> int:
    """Return x unchanged: the cheapest possible tool, so the numbers measure the path, not the tool.

    Args:
        x: Any integer.
    """
    return x
