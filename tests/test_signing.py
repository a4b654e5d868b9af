"""Signatures in cosign's format (issue 61): `tooldock keygen` / `sign` / `verify`, checked by a reader that is not
ToolDock's own: Debian's skopeo (Debian 13's 1.18, set up by scripts/skopeo-sigstore: Debian 12's is built with
sigstore disabled) with a `sigstoreSigned` policy against the loopback docker-registry accepts a signed image
and refuses an unsigned one, another key's and a tampered signature. The SBOM and provenance attestations
(in-toto statements in DSSE envelopes under cosign's `.att` tag) are read from the registry with skopeo and
their signatures checked by the DSSE spec's algorithm written here with `cryptography`, and by
securesystemslib's DSSE verifier. The key file is cosign's encrypted format (cosign's own test key decrypts).
Signed-only mode: `tooldock deploy` refuses an unsigned image and runs a signed one pulled from the
registry."""

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
DSSE, CYCLONEDX, SLSA = "application/vnd.dsse.envelope.v1+json", "https://cyclonedx.org/bom", "https://slsa.dev/provenance/v1"

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


def skopeo_dir(ref: str, dest: Path) -> tuple[dict, Path]:
    """`skopeo copy` of one manifest and its blobs from the loopback registry to a `dir:`: (manifest, dir)."""
    subprocess.run(["skopeo", "copy", "--src-tls-verify=false", f"docker://{ref}", f"dir:{dest}"], check=True,
                   capture_output=True, timeout=120)
    return json.loads((dest / "manifest.json").read_text()), dest


def dsse_statement(envelope: dict, pub: Path) -> dict:
    """The statement of a DSSE envelope whose signature `pub` checks, by the DSSE spec (protocol.md: the signature
    is over PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body), with `cryptography` alone."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    body, kind = base64.b64decode(envelope["payload"]), envelope["payloadType"].encode()
    pae = b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)
    key = serialization.load_pem_public_key(pub.read_bytes())
    assert isinstance(key, ec.EllipticCurvePublicKey)
    key.verify(base64.b64decode(envelope["signatures"][0]["sig"]), pae, ec.ECDSA(hashes.SHA256()))
    return json.loads(body)


def sslib_verifies(envelope: dict, pub: Path) -> bool:
    """securesystemslib's DSSE verifier (it matches signatures to keys by keyid: cosign's is empty)."""
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey

    made = SSlibKey.from_crypto(serialization.load_pem_public_key(pub.read_bytes()))  # type: ignore[arg-type]
    key = SSlibKey("", made.keytype, made.scheme, made.keyval)
    try:
        Envelope.from_dict(json.loads(json.dumps(envelope))).verify([key], 1)
        return True
    except VerificationError:
        return False


def test_attestations_are_dsse_envelopes_in_cosigns_att_tag_checked_by_independent_readers(signed, keys, registry,
                                                                                           tmp_path):
    """The `.att` manifest and the attached documents read with skopeo from the registry; each envelope checked by
    the DSSE spec's algorithm and by securesystemslib; subject: the digest skopeo reports; predicates: the
    attached SBOM and provenance (as skopeo reads them, from the `.sbom` tag and the referrers index)."""
    require("skopeo")
    digest = json.loads(subprocess.run(["skopeo", "inspect", "--tls-verify=false", f"docker://{signed['ref']}"],
                                       capture_output=True, text=True, check=True).stdout)["Digest"]
    assert digest == signed["digest"]
    repo, hexa = signed["ref"].rsplit(":", 1)[0], digest.split(":")[1]
    manifest, att = skopeo_dir(f"{repo}:sha256-{hexa}.att", tmp_path / "att")
    assert [layer["mediaType"] for layer in manifest["layers"]] == [DSSE, DSSE]
    assert sorted(layer["annotations"]["predicateType"] for layer in manifest["layers"]) == [CYCLONEDX, SLSA]
    assert all(layer["annotations"]["dev.cosignproject.cosign/signature"] == "" for layer in manifest["layers"])
    sbom_manifest, sbom_dir = skopeo_dir(f"{repo}:sha256-{hexa}.sbom", tmp_path / "sbom")
    sbom = json.loads((sbom_dir / sbom_manifest["layers"][0]["digest"].split(":")[1]).read_bytes())
    index = json.loads(subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false",
                                       f"docker://{repo}:sha256-{hexa}"], capture_output=True, text=True,
                                      check=True).stdout)
    prov_digest = next(m["digest"] for m in index["manifests"] if m["artifactType"] == PROVENANCE)
    prov_manifest, prov_dir = skopeo_dir(f"{repo}@{prov_digest}", tmp_path / "prov")
    provenance = json.loads((prov_dir / prov_manifest["layers"][0]["digest"].split(":")[1]).read_bytes())
    expected = {CYCLONEDX: sbom, SLSA: provenance["predicate"]}
    for layer in manifest["layers"]:
        envelope = json.loads((att / layer["digest"].split(":")[1]).read_bytes())
        assert envelope["payloadType"] == "application/vnd.in-toto+json"
        statement = dsse_statement(envelope, keys / "ci.pub")
        assert statement["_type"] == "https://in-toto.io/Statement/v1"
        assert statement["predicateType"] == layer["annotations"]["predicateType"]
        assert statement["subject"][0]["digest"] == {"sha256": hexa}
        assert statement["predicate"] == expected[statement["predicateType"]]
        assert sslib_verifies(envelope, keys / "ci.pub") and not sslib_verifies(envelope, keys / "other.pub")
    tags = subprocess.run(["skopeo", "list-tags", "--tls-verify=false", f"docker://{repo}"], capture_output=True,
                          text=True, check=True).stdout
    assert set(json.loads(tags)["Tags"]) >= {f"sha256-{hexa}{s}" for s in ("", ".sig", ".att", ".sbom")}


def test_a_tampered_signature_is_refused_by_skopeo_and_tooldock(signed, keys, registry, tmp_path):
    """The same image pushed to a third repository, given (1) the signed payload edited to name that repository,
    with the original signature; (2) a valid signature by the right key of another digest."""
    from tooldock.builder.cosignkey import load_private
    from tooldock.builder.places import RegistryPlace
    from tooldock.builder.simplesigning import Signature, as_layers, sign, signatures_of

    cli("build", str(signed["tmp"] / "basic-tool"), "-o", str(tmp_path / "t"), "--push", f"{registry}/tampered")
    ref = f"{registry}/tampered/basic-tool:latest"
    source, target = RegistryPlace(signed["ref"]), RegistryPlace(ref)
    assert target.digest == source.digest == signed["digest"]  # reproducible: the same image bytes
    real = signatures_of(source.read("sig"))[0]
    edited = json.loads(real.payload)
    edited["critical"]["identity"]["docker-reference"] = target.identity
    target.write("sig", as_layers([Signature(json.dumps(edited, separators=(",", ":")).encode(), real.b64sig)]))
    ok, err = skopeo_accepts(registry, ref, keys / "ci.pub", tmp_path)
    assert not ok and "signature" in err, err
    proc = cli("verify", ref, "--key", str(keys / "ci.pub"), check=False)
    assert proc.returncode == 4 and "altered" in proc.stderr
    key = load_private(keys / "ci.key", PASSWORD.encode())
    other_digest = "sha256:" + "0" * 64
    target.write("sig", as_layers([sign(key, target.identity, other_digest)]))
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
    hexa = signed["digest"].split(":")[1]
    index = json.loads((fresh / "index.json").read_text())
    named = {m.get("annotations", {}).get("org.opencontainers.image.ref.name"): m for m in index["manifests"]}
    assert next(iter(named)) == "latest" and f"sha256-{hexa}.sig" in named
    # cosign's own layouts mark each entry's kind (what `cosign verify --local-image` looks for)
    kinds = [(m.get("annotations") or {}).get("kind") for m in index["manifests"]]
    assert kinds == ["dev.cosignproject.cosign/image", None, None, "dev.cosignproject.cosign/sigs",
                     "dev.cosignproject.cosign/atts"]
    blob = lambda d: json.loads((fresh / "blobs" / d.replace(":", "/")).read_bytes())  # noqa: E731
    sig, att = blob(named[f"sha256-{hexa}.sig"]["digest"]), blob(named[f"sha256-{hexa}.att"]["digest"])
    assert [layer["mediaType"] for layer in sig["layers"]] == ["application/vnd.dev.cosign.simplesigning.v1+json"] * 2
    assert all(layer["annotations"]["dev.cosignproject.cosign/signature"] for layer in sig["layers"])
    # one attestation per key and document: signing again with ci.key replaced its own
    assert sorted(layer["annotations"]["predicateType"] for layer in att["layers"]) == [CYCLONEDX] * 2 + [SLSA] * 2
    for pub in ("ci.pub", "other.pub"):
        listing = cli("verify", str(fresh), "--key", str(keys / pub)).stdout
        assert SBOM in listing and PROVENANCE in listing and CYCLONEDX in listing
    assert SBOM in cli("inspect", str(fresh)).stdout  # the layout, signatures and all, is still read by inspect


def test_an_altered_or_missing_attestation_is_refused(signed, keys, tmp_path):
    """On copies of the signed layout: the SBOM's attestation with its statement edited (signature kept), one
    validly signed about another image, one holding another SBOM, and none at all."""
    from tooldock.builder.cosignkey import load_private
    from tooldock.builder.dsse import CYCLONEDX as SBOM_TYPE
    from tooldock.builder.dsse import Attestation, attest, statement
    from tooldock.builder.places import LayoutPlace

    key = load_private(keys / "ci.key", PASSWORD.encode())
    here = LayoutPlace(signed["layout"])
    manifest, blobs = here.read("att")
    envelopes = {layer["annotations"]["predicateType"]: json.loads(blobs[layer["digest"]]) for layer in
                 manifest["layers"]}
    sbom = dsse_statement(envelopes[CYCLONEDX], keys / "ci.pub")["predicate"]
    edited = dict(envelopes[CYCLONEDX])
    changed = {**sbom, "components": sbom["components"][1:]}
    edited["payload"] = base64.b64encode(statement(SBOM_TYPE, changed, here.identity, here.digest)).decode()
    provenance = Attestation(json.dumps(envelopes[SLSA]).encode(), SLSA)
    cases = {
        "altered": Attestation(json.dumps(edited).encode(), CYCLONEDX),
        "not the image": attest(key, SBOM_TYPE, statement(SBOM_TYPE, sbom, here.identity, "sha256:" + "1" * 64)),
        "differs from the attached document": attest(key, SBOM_TYPE,
                                                     statement(SBOM_TYPE, changed, here.identity, here.digest)),
    }
    for i, (said, attestation) in enumerate(cases.items()):
        copy = tmp_path / str(i)
        shutil.copytree(signed["layout"], copy)
        LayoutPlace(copy).write("att", [(a.layer(), a.envelope) for a in (attestation, provenance)])
        proc = cli("verify", str(copy), "--key", str(keys / "ci.pub"), check=False)
        assert proc.returncode == 4 and "has no valid attestation" in proc.stderr and said in proc.stderr, proc.stderr
    bare = tmp_path / "bare"
    shutil.copytree(signed["layout"], bare)
    index = json.loads((bare / "index.json").read_text())
    index["manifests"] = [m for m in index["manifests"] if not m.get("annotations", {}).get(
        "org.opencontainers.image.ref.name", "").endswith(".att")]
    (bare / "index.json").write_text(json.dumps(index))
    proc = cli("verify", str(bare), "--key", str(keys / "ci.pub"), check=False)
    assert proc.returncode == 3 and "has no attestation" in proc.stderr and "tooldock sign" in proc.stderr
    assert cli("verify", str(bare), "--key", str(keys / "ci.pub"), "--image-only").returncode == 0


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
