"""ToolDock: folders of Python `@tool` functions, compiled into isolated workers and served over MCP and REST."""

__version__ = "0.1.0"
