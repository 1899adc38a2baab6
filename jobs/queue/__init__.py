"""The rules of a team's queue that the models build on (below `jobs.models`): the order and
who may ever start (`queueing`), per-person caps (`caps`), backfill around a reservation
(`backfill`), the forward simulation of start times (`eta`), and one look at a queue (`looks`)."""
