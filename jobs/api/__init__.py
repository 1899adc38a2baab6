"""The jobs REST API: the job viewset and its serializers (`views`), and the start estimate
it carries (`eta`). An edge: it changes the cluster only through `jobs.actions`."""
