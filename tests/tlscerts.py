"""A private CA and a server certificate it signed, made with ``openssl`` for the tests' TLS servers.

The server certificate names 127.0.0.1, ::1, localhost and ``*.<domain>`` for each domain given
(buckets addressed virtual-hosted style). Clients trust it through the CA's file only (as
``AWS_CA_BUNDLE`` names it), never by turning verification off.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certs:
    ca: Path  # the CA's certificate (PEM): what clients trust
    cert: Path  # the server's certificate (PEM)
    key: Path  # the server's private key (PEM)


def make_certs(where: Path, domains: tuple[str, ...] = ()) -> Certs:
    where.mkdir(parents=True, exist_ok=True)
    ca, ca_key = where / "ca.pem", where / "ca.key"
    cert, key, csr, ext = where / "server.pem", where / "server.key", where / "server.csr", where / "san.ext"
    names = ["IP:127.0.0.1", "IP:::1", "DNS:localhost", *(f"DNS:{d}" for d in domains), *(f"DNS:*.{d}" for d in domains)]
    ext.write_text(f"subjectAltName={','.join(names)}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                   "extendedKeyUsage=serverAuth\n")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "30",
        "-subj", "/CN=nczfs test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-out", str(cert),
        "-days", "30", "-extfile", str(ext))
    return Certs(ca, cert, key)
