"""The jobs pages in the browser: the list and the submission form (`views`), and a job's own
page with its pods, logs and GPUs (`pages`). An edge, like the API."""
