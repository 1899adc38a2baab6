"""The live half of the security findings (issue 29): what needs Helm, the local cluster or
the IdP; the rest of each finding is in tests/security/, in a file of the same name."""
