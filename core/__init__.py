"""The platform's shared core: what every app needs and no app owns.

Ownership labels (`ownership`), the REST API's error shape (`api_errors`), the reconcile
step every task runs (`reconcile`), and input validators (`validators`). It imports only
`cluster/` (and Django); every app imports it, it imports no app.
"""
