"""Namespace folder -> OCI image, without a Docker daemon.

One module per stage, composed in `build`:
    lock     requirements.txt -> hashed lock for the image's Python and platform (uv)
    install  lock -> a directory of installed packages (uv pip install --target)
    schema   namespace + installed packages -> tools.json (the worker's own extraction)
    tarball  files -> a reproducible gzip layer (sorted, uid/gid 0, fixed mtimes, gzip mtime 0)
    blobs    the content-addressed store and the layer cache keyed by inputs
    oci      manifest, config, index: the OCI image layout on disk
    archive  an OCI layout that is also a `docker load` archive, in one tar
    base     a minimal Python base image from pinned Debian packages (apt-get download + dpkg-deb -x)
    registry push and pull over the OCI distribution API; registryauth: the credentials they answer with
"""

# Environment variables `tooldock build` / `tooldock base` read (the README documents each).
ENV_VARS = (
    "TOOLDOCK_CACHE_DIR",
    "SOURCE_DATE_EPOCH",
    "TOOLDOCK_REGISTRY_USERNAME",
    "TOOLDOCK_REGISTRY_PASSWORD",
    "DOCKER_CONFIG",
    "TOOLDOCK_SCHEMA_ZYGOTE",
    "TOOLDOCK_SCHEMA_ZYGOTE_IDLE",
    "DOCKER_HOST",
)
