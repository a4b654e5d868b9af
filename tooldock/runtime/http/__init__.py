"""The HTTP front end: REST routes (`rest`), typed OpenAPI per namespace (`openapi`), Swagger UI pages
(`docs`), bearer auth (`auth`) and the one place gateway errors become HTTP responses (`responses`).
It reaches workers only through the engine.
"""
