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

from tooldock.envvars import EnvVar, names

# Environment variables `tooldock build` / `tooldock base` read (docs/reference/settings.md is generated from these).
SETTINGS_TITLE = "Builds (`tooldock build`)"
SETTINGS_INTRO = "Build settings (environment), read by `tooldock build`, `tooldock base` and `tooldock deploy`."
SETTINGS: tuple[EnvVar, ...] = (
    EnvVar(
        "TOOLDOCK_CACHE_DIR",
        "`~/.cache/tooldock/build`",
        "blobs, layer index, installed trees, framework locks, the base",
    ),
    EnvVar(
        "SOURCE_DATE_EPOCH",
        "`0`",
        "the timestamp written into layers and image config",
    ),
    EnvVar(
        "TOOLDOCK_REGISTRY_USERNAME",
        "—",
        "credentials for `--push` / registry `--base` (token and basic auth), for every registry; unset: what "
        "`docker login` left (`DOCKER_CONFIG`). Registries on loopback are spoken to over HTTP, all others over HTTPS",
    ),
    EnvVar(
        "TOOLDOCK_REGISTRY_PASSWORD",
        "—",
        "credentials for `--push` / registry `--base` (token and basic auth), for every registry; unset: what "
        "`docker login` left (`DOCKER_CONFIG`). Registries on loopback are spoken to over HTTP, all others over HTTPS",
    ),
    EnvVar(
        "DOCKER_CONFIG",
        "`~/.docker`",
        "where Docker's `config.json` is: with no `TOOLDOCK_REGISTRY_USERNAME`, the registry's credentials come "
        "from it as `docker login` writes them, the first found of its credential helper (`credHelpers`), its "
        "`auths` entry, then the default store (`credsStore`); a helper is `docker-credential-<name>` on `PATH`. "
        "Read only when a registry asks for credentials. Identity tokens (OAuth) are not supported: the error says so",
    ),
    EnvVar(
        "TOOLDOCK_SCHEMA_ZYGOTE",
        "`1`",
        "`0` turns off the warm schema-extraction helper (a fresh interpreter per extraction)",
    ),
    EnvVar(
        "TOOLDOCK_SCHEMA_ZYGOTE_IDLE",
        "`300`",
        "seconds the helper waits for the next build before exiting",
    ),
    EnvVar(
        "DOCKER_HOST",
        "the default socket",
        "the engine for `--load`, `--engine docker` and engine `--base` references",
    ),
    EnvVar(
        "TOOLDOCK_SIGNING_PASSWORD",
        "—",
        "the passphrase of the signing key for `tooldock keygen`, `sign` and `build --sign-key`; unset: a prompt "
        "(none without a terminal: the command fails and says so)",
    ),
    EnvVar(
        "TOOLDOCK_REQUIRE_SIGNED_BY",
        "unset",
        "signed-only mode: comma-separated public key files (`PREFIX.pub`); `tooldock deploy`, the manager's "
        "deploys and anything calling `require_signed` refuse an image without a valid cosign signature by one of "
        "them, looked up in the registry the image was pulled from "
        "([supply chain](../howto/supply-chain.md#signed-only-mode))",
    ),
)
ENV_VARS = names(SETTINGS)
