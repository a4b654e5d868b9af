from fastmcp import Context
from fastmcp.tools import tool


@tool
def echo_number(x: int) -> int:
    """Return x unchanged: the cheapest possible tool, so the numbers measure the path, not the tool.

    Args:
        x: Any integer.
    """
    return x


@tool
async def echo_progress(x: int, ctx: Context) -> int:
    """Report one progress notification, then return x: measures the Context relay (worker session,
    event message, notification to the caller).

    Args:
        x: Any integer.
    """
    await ctx.report_progress(1, 1)
    return x
