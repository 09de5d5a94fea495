"""apimachinery's name validators (k8s.io/apimachinery/pkg/util/validation), with upstream's messages."""

from __future__ import annotations

import re

SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
QNAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                 "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                 "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
               "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
               "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
QNAME_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_PORT_CHARS = re.compile(r"^[-a-z0-9]+$")


def max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def dns1123_label_errors(value: str) -> list[str]:
    errs = [max_len(63)] if len(value) > 63 else []
    if not LABEL.match(value):
        errs.append("must not contain dots" if SUBDOMAIN.match(value) else LABEL_MSG)
    return errs


def dns1123_subdomain_errors(value: str) -> list[str]:
    errs = [max_len(253)] if len(value) > 253 else []
    if not SUBDOMAIN.match(value):
        errs.append(SUBDOMAIN_MSG)
    return errs


def dns1035_label_errors(value: str) -> list[str]:
    errs = [max_len(63)] if len(value) > 63 else []
    if not DNS1035.match(value):
        errs.append(DNS1035_MSG)
    return errs


def qualified_name_errors(value: str) -> list[str]:
    """IsQualifiedName: [prefix/]name, name <= 63 chars."""
    prefix, slash, name = value.rpartition("/")
    errs: list[str] = []
    if slash and not prefix:
        errs.append("prefix part must be non-empty")
    elif prefix:
        errs += [f"prefix part {e}" for e in dns1123_subdomain_errors(prefix)]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len(63))
    if not QNAME.match(name):
        errs.append(QNAME_MSG)
    return errs


def port_name_errors(port: str) -> list[str]:
    """IsValidPortName (IANA_SVC_NAME)."""
    errs = [max_len(15)] if len(port) > 15 else []
    if not _PORT_CHARS.match(port):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search(r"[a-z]", port):
        errs.append("must contain at least one letter (a-z)")
    if "--" in port:
        errs.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs
