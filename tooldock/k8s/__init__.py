"""`tooldock k8s render`: the Kubernetes manifests that run a tools directory on a cluster.

The pipeline, one module per stage:

    plan        the inputs: the namespaces as scanned, each image by digest, the gateway's replicas
    images      where the digests come from: built and pushed now (the daemonless builder), or OCI layouts
    pods        what every pod shares: the "restricted" security context, probes, resources from limits
    workers     per namespace: Deployment, headless Service, PodDisruptionBudget, NetworkPolicy
    gateway     the gateway (Deployment, Service, HPA, PDB, NetworkPolicy), Redis, the Namespace, default deny
    secrets     Secret names and keys; the `kubectl create secret` script; with values only on request
    output      the objects as YAML files, sorted, one file per kind (deterministic)

Nothing here talks to a Kubernetes API server: the output is files. Secret values never reach the manifests
(only the separate file `--with-secrets` asks for, written 0600).
"""

from __future__ import annotations


class K8sError(ValueError):
    """What cannot be rendered, and what to do instead (the CLI prints it as is)."""
