"""Questions about waiting jobs, read over the models: will it start (`feasibility`,
`fragmentation`), where Kueue puts it (`pending`), which jobs the platform holds for a
reservation (`reservations`), when it will start (`estimates`), and what a drain leaves
running (`drains`)."""
