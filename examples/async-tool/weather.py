"""
Async tool example with external API call.
Requires: httpx (declared in requirements.txt)
Requires: WEATHER_API_KEY secret (declared in tooldock.yaml)
"""
import os

import httpx
from fastmcp.tools import tool


@tool
async def get_weather(city: str, units: str = "metric") -> dict:
    """Get current weather for a city.

    Args:
        city: City name (e.g. "Berlin", "New York").
        units: Temperature units — "metric" (Celsius) or "imperial" (Fahrenheit).

    Returns:
        Dict with temperature, description, humidity.
    """
    api_key = os.environ["WEATHER_API_KEY"]
    base_url = os.environ.get("WEATHER_BASE_URL", "https://api.openweathermap.org")
    async with httpx.AsyncClient() as client:
        resp = await client.get(
            f"{base_url}/data/2.5/weather",
            params={"q": city, "units": units, "appid": api_key},
        )
        resp.raise_for_status()
        data = resp.json()
    return {
        "city": data["name"],
        "temperature": data["main"]["temp"],
        "description": data["weather"][0]["description"],
        "humidity": data["main"]["humidity"],
    }
