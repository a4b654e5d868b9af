"""Signatures in cosign's format (issue 61): `tooldock keygen` / `sign` / `verify`, checked by a reader that is not
ToolDock's own: Debian's skopeo (Debian 13's 1.18, set up by scripts/skopeo-sigstore: Debian 12's is built with
sigstore disabled) with a `sigstoreSigned` policy against the loopback docker-registry accepts a signed image
and refuses an unsigned one, another key's and a tampered signature. The key file is cosign's encrypted format
(cosign's own test key decrypts). Signed-only mode: `tooldock deploy` refuses an unsigned image and runs a
signed one pulled from the registry."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import EXAMPLES, STATE_DIR, require, tooldock_cli

PASSWORD = "correct horse"
ENV = {"TOOLDOCK_SIGNING_PASSWORD": PASSWORD}
SBOM, PROVENANCE = "application/vnd.cyclonedx+json", "application/vnd.in-toto+json"

# cosign's own test vector (sigstore/cosign, pkg/cosign/keys_test.go, `pemsigstorekey`, Apache-2.0): an ECDSA
# P-256 key encrypted by cosign with the passphrase "hello".
COSIGN_KEY = """-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----
eyJrZGYiOnsibmFtZSI6InNjcnlwdCIsInBhcmFtcyI6eyJOIjozMjc2OCwiciI6
OCwicCI6MX0sInNhbHQiOiI3T3VGd2VsbWZZNXVId2NoaURSc210anNwZ2ZlZjFG
Mk5lOGFDTjVLYVpZPSJ9LCJjaXBoZXIiOnsibmFtZSI6Im5hY2wvc2VjcmV0Ym94
Iiwibm9uY2UiOiJQNHk4OGhCb3ZTa09MbXN0bFVBaGJwdDJ0K2xTNUxQSCJ9LCJj
aXBoZXJ0ZXh0IjoiMnB1QzdyZldJOWh3bnJlQ2s4aUZDRlVwQlRrSzRJNlIvbFBF
cnBDekpXUGpJWXl4eGVIL1A2VW52cFJHdVhla1NNb3JMdGhLamdoQ1JlNy82NDVH
QWtoVm1LRC92eEF0S2EvbE1abENSQ3FlekJGUFd1dzNpeFRtZ2xhb2J1ZFVSbUVs
bmNGOGlZbzBTMVl6Y1ZOMVFwY2J2c0dNcUlYRzVlbmdteGp5dCtBcXlyZTF0Q0Y0
V01tU1BlaEljNlBqd2h1Q2xHaVpJUWRvTGc9PSJ9
-----END ENCRYPTED SIGSTORE PRIVATE KEY-----
"""


def cli(*args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    return tooldock_cli(*args, env={**ENV, **env}, check=check)


def skopeo_sigstore() -> str:
    """A skopeo whose sigstoreSigned policy works: scripts/skopeo-sigstore's, else the system's if not Debian 12's."""
    wrapped = STATE_DIR / "skopeo-sigstore" / "skopeo"
    if wrapped.is_file():
        return str(wrapped)
    require("skopeo")
    system = shutil.which("skopeo")
    assert system is not None
    if b"sigstore disabled" in Path(system).read_bytes():
        require("a skopeo with sigstore (run scripts/skopeo-sigstore)")
    return system


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("keys")
    cli("keygen", str(tmp / "ci"))
    cli("keygen", str(tmp / "other"))
    return tmp


@pytest.fixture(scope="module")
def signed(keys, registry, tmp_path_factory):
    """basic-tool built and pushed to the loopback registry signed (--sign-key), and a variant unsigned."""
    require("apt-get", "dpkg-deb")
    tmp = tmp_path_factory.mktemp("signed")
    shutil.copytree(EXAMPLES / "basic-tool", tmp / "basic-tool", ignore=shutil.ignore_patterns("__pycache__"))
    out = cli("build", "--json", str(tmp / "basic-tool"), "-o", str(tmp / "oci"), "--push", f"{registry}/signed",
              "--sign-key", str(keys / "ci.key")).stdout
    result = json.loads(out.splitlines()[-1])
    other = tmp / "unsigned" / "basic-tool"  # another image: the same bytes would be signed already (by digest)
    shutil.copytree(tmp / "basic-tool", other)
    (other / "NOTES.txt").write_text("not signed\n")
    cli("build", str(other), "-o", str(tmp / "bare"), "--push", f"{registry}/unsigned")
    return {"tmp": tmp, "digest": result["digest"], "layout": tmp / "oci" / "basic-tool",
            "ref": f"{registry}/signed/basic-tool:latest", "unsigned": f"{registry}/unsigned/basic-tool:latest"}


def skopeo_accepts(registry: str, ref: str, pub: Path, tmp: Path) -> tuple[bool, str]:
    """`skopeo copy` under a policy that requires a sigstore signature by `pub` for the whole registry."""
    (tmp / "registries.d").mkdir(exist_ok=True)
    (tmp / "registries.d" / "loopback.yaml").write_text(
        f"docker:\n  {registry}:\n    use-sigstore-attachments: true\n")
    policy = {"default": [{"type": "reject"}], "transports": {"docker": {registry: [
        {"type": "sigstoreSigned", "keyPath": str(pub), "signedIdentity": {"type": "matchRepository"}}]}}}
    (tmp / "policy.json").write_text(json.dumps(policy))
    dest = Path(tempfile.mkdtemp(dir=tmp))
    proc = subprocess.run([skopeo_sigstore(), "--policy", str(tmp / "policy.json"), "--registries.d",
                           str(tmp / "registries.d"), "copy", "--src-tls-verify=false", f"docker://{ref}",
                           f"dir:{dest}"], capture_output=True, text=True, timeout=120)
    return proc.returncode == 0, proc.stderr


def test_keys_are_cosigns_encrypted_format_and_cosigns_own_key_decrypts(keys, tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from tooldock.builder.cosignkey import SigningError, WrongPassphrase, decrypt

    text = (keys / "ci.key").read_text()
    assert text.startswith("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
    assert (keys / "ci.key").stat().st_mode & 0o777 == 0o600
    body = json.loads(base64.b64decode("".join(text.strip().splitlines()[1:-1])))
    assert body["kdf"]["name"] == "scrypt" and body["kdf"]["params"] == {"N": 32768, "r": 8, "p": 1}
    assert body["cipher"]["name"] == "nacl/secretbox" and len(base64.b64decode(body["cipher"]["nonce"])) == 24
    key = decrypt(text, PASSWORD.encode())
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
    pub = serialization.load_pem_public_key((keys / "ci.pub").read_bytes())
    assert pub.public_numbers() == key.public_key().public_numbers()
    with pytest.raises(WrongPassphrase):
        decrypt(text, b"wrong")
    cosigns = decrypt(COSIGN_KEY, b"hello")
    assert isinstance(cosigns, ec.EllipticCurvePrivateKey) and cosigns.curve.name == "secp256r1"
    with pytest.raises(WrongPassphrase):
        decrypt(COSIGN_KEY, b"hellO")
    with pytest.raises(SigningError, match="not an encrypted cosign private key"):
        decrypt((keys / "ci.pub").read_text(), b"hello")
    # cosign's key signs with ToolDock too; wrong passphrases and existing files are refused clearly
    (tmp_path / "cosign.key").write_text(COSIGN_KEY)
    wrong = cli("sign", "/nonexistent", "--key", str(tmp_path / "cosign.key"), check=False)
    assert wrong.returncode == 5 and "wrong passphrase" in wrong.stderr and "Traceback" not in wrong.stderr
    again = cli("keygen", str(keys / "ci"), check=False)
    assert again.returncode == 1 and "exist" in again.stderr
    prompt = tooldock_cli("keygen", str(tmp_path / "p"), check=False)  # no passphrase and no terminal
    assert prompt.returncode == 1 and "TOOLDOCK_SIGNING_PASSWORD" in prompt.stderr


def test_skopeo_verifies_the_signed_image_and_refuses_unsigned_and_another_key(signed, keys, registry, tmp_path):
    ok, err = skopeo_accepts(registry, signed["ref"], keys / "ci.pub", tmp_path)
    assert ok, err
    ok, err = skopeo_accepts(registry, signed["unsigned"], keys / "ci.pub", tmp_path)
    assert not ok and "no signature exists" in err
    ok, err = skopeo_accepts(registry, signed["ref"], keys / "other.pub", tmp_path)
    assert not ok and "signature" in err
    verified = json.loads(cli("verify", signed["ref"], "--key", str(keys / "ci.pub"), "--json").stdout)
    assert verified["digest"] == signed["digest"]
    assert {a["artifactType"] for a in verified["attached"]} == {SBOM, PROVENANCE}
    unsigned = cli("verify", signed["unsigned"], "--key", str(keys / "ci.pub"), check=False)
    assert unsigned.returncode == 3 and "is not signed" in unsigned.stderr
    other = cli("verify", signed["ref"], "--key", str(keys / "other.pub"), check=False)
    assert other.returncode == 4 and "no valid signature" in other.stderr
    either = cli("verify", signed["ref"], "--key", str(keys / "other.pub"), "--key", str(keys / "ci.pub"))
    assert "verified " + signed["digest"] in either.stdout


def test_a_tampered_signature_is_refused_by_skopeo_and_tooldock(signed, keys, registry, tmp_path):
    """The same image pushed to a third repository, given (1) the signed payload edited to name that repository,
    with the original signature; (2) a valid signature by the right key of another digest."""
    from tooldock.builder.cosignkey import load_private
    from tooldock.builder.signing import RegistryPlace
    from tooldock.builder.simplesigning import Signature, sign

    cli("build", str(signed["tmp"] / "basic-tool"), "-o", str(tmp_path / "t"), "--push", f"{registry}/tampered")
    ref = f"{registry}/tampered/basic-tool:latest"
    source, target = RegistryPlace(signed["ref"]), RegistryPlace(ref)
    assert target.digest == source.digest == signed["digest"]  # reproducible: the same image bytes
    real = source.signatures(source.digest)[0]
    edited = json.loads(real.payload)
    edited["critical"]["identity"]["docker-reference"] = target.identity
    target.write_signatures(target.digest, [Signature(json.dumps(edited, separators=(",", ":")).encode(),
                                                      real.b64sig)])
    ok, err = skopeo_accepts(registry, ref, keys / "ci.pub", tmp_path)
    assert not ok and "signature" in err, err
    proc = cli("verify", ref, "--key", str(keys / "ci.pub"), check=False)
    assert proc.returncode == 4 and "altered" in proc.stderr
    key = load_private(keys / "ci.key", PASSWORD.encode())
    other_digest = "sha256:" + "0" * 64
    target.write_signatures(target.digest, [sign(key, target.identity, other_digest)])
    ok, err = skopeo_accepts(registry, ref, keys / "ci.pub", tmp_path)
    assert not ok and "digest" in err.lower(), err
    proc = cli("verify", ref, "--key", str(keys / "ci.pub"), check=False)
    assert proc.returncode == 4 and f"the signature is of {other_digest}, not of this image" in proc.stderr


def test_a_layout_is_signed_in_its_index_and_verified(signed, keys, tmp_path):
    layout = tmp_path / "layout"
    shutil.copytree(signed["layout"], layout)
    assert cli("verify", str(layout), "--key", str(keys / "ci.pub")).returncode == 0  # --sign-key signed it
    cli("build", str(signed["tmp"] / "basic-tool"), "-o", str(tmp_path / "fresh"))
    fresh = tmp_path / "fresh" / "basic-tool"
    assert cli("verify", str(fresh), "--key", str(keys / "ci.pub"), check=False).returncode == 3
    cli("sign", str(fresh), "--key", str(keys / "other.key"))
    cli("sign", str(fresh), "--key", str(keys / "ci.key"))
    cli("sign", str(fresh), "--key", str(keys / "ci.key"))  # again: the same signature is not added twice
    index = json.loads((fresh / "index.json").read_text())
    names = [m.get("annotations", {}).get("org.opencontainers.image.ref.name") for m in index["manifests"]]
    assert names[0] == "latest" and names.count(f"sha256-{signed['digest'].split(':')[1]}.sig") == 1
    sig = next(m for m in index["manifests"] if (m.get("annotations") or {}).get(
        "org.opencontainers.image.ref.name", "").startswith(f"sha256-{signed['digest'].split(':')[1]}"))
    manifest = json.loads((fresh / "blobs" / sig["digest"].replace(":", "/")).read_bytes())
    assert [layer["mediaType"] for layer in manifest["layers"]] == ["application/vnd.dev.cosign.simplesigning.v1+json"] * 2
    assert all(layer["annotations"]["dev.cosignproject.cosign/signature"] for layer in manifest["layers"])
    for pub in ("ci.pub", "other.pub"):
        listing = cli("verify", str(fresh), "--key", str(keys / pub)).stdout
        assert SBOM in listing and PROVENANCE in listing
    assert SBOM in cli("inspect", str(fresh)).stdout  # the layout, signatures and all, is still read by inspect


def test_signed_only_mode_refuses_unsigned_and_runs_signed(signed, keys, registry, docker_host):
    import docker

    client = docker.DockerClient(base_url=docker_host)
    for ref in (signed["ref"], signed["unsigned"]):
        client.images.pull(ref)
    sockets = Path(tempfile.mkdtemp(prefix="tds-"))
    env = {"DOCKER_HOST": docker_host, "TOOLDOCK_SOCKET_DIR": str(sockets),
           "TOOLDOCK_REQUIRE_SIGNED_BY": f"{keys / 'other.pub'},{keys / 'ci.pub'}"}
    try:
        refused = cli("deploy", signed["unsigned"], check=False, **env)
        assert refused.returncode == 1 and "refusing to run image" in refused.stderr
        assert "is not signed" in refused.stderr and "tooldock sign" in refused.stderr
        local_dir = signed["tmp"] / "local" / "basic-tool"  # built and loaded here, never pulled
        shutil.copytree(signed["tmp"] / "basic-tool", local_dir)
        (local_dir / "NOTES.txt").write_text("built here\n")
        local = cli("deploy", str(local_dir), check=False, **env)
        assert local.returncode == 1 and "not pulled from a registry" in local.stderr
        wrong = cli("deploy", signed["ref"], check=False, **{**env, "TOOLDOCK_REQUIRE_SIGNED_BY": str(keys / "other.pub")})
        assert wrong.returncode == 1 and "no valid signature" in wrong.stderr
        ran = json.loads(cli("deploy", signed["ref"], "--json", "--drain", "1", **env).stdout)
        assert ran["namespace"] == "basic-tool" and client.containers.get(ran["container"]).status == "running"
    finally:
        for container in client.containers.list(all=True, filters={"label": "io.tooldock.namespace"}):
            if any(str(m.get("Source", "")).startswith(str(sockets)) for m in container.attrs.get("Mounts") or []):
                container.remove(force=True)
        shutil.rmtree(sockets, ignore_errors=True)


def test_verify_rebuild_reproduces_the_digest_from_a_fresh_cache(signed, tmp_path):
    """The provenance's parameters and a build cache holding only the downloaded packages and resolved locks:
    the same digest as the image built with the warm test cache."""
    proc = cli("verify", str(signed["layout"]), "--rebuild", str(signed["tmp"] / "basic-tool"), "--json")
    assert json.loads(proc.stdout) == {"rebuilt": signed["digest"]}
    cli("build", str(signed["tmp"] / "basic-tool"), "-o", str(tmp_path / "bare"), "--no-attach")
    bare = cli("verify", str(tmp_path / "bare" / "basic-tool"), "--rebuild", str(signed["tmp"] / "basic-tool"),
               check=False)
    assert bare.returncode == 1 and "no provenance attached" in bare.stderr
