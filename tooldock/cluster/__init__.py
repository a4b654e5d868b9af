"""The cluster CA: the certificates gateways and workers on different hosts authenticate each other with.

`tooldock cluster ca init|rotate|retire` and `tooldock cluster cert` (tooldock/cli/cluster.py) run `ca.py`;
the transport that uses what it writes (mutual TLS, TLS 1.3) is the worker's and the gateway's,
`tooldock/worker/tls.py`, which needs only the standard library: this package (the `cryptography`
package) runs where certificates are made, never in a worker image.
"""

from tooldock.cluster.ca import CertInfo, ClusterError, init, issue, retire, rotate, status

__all__ = ["CertInfo", "ClusterError", "init", "issue", "retire", "rotate", "status"]
