-- select_ingested_events.sql
-- What: the rows of one input file that are fit for ack_events, in its column order.
-- Who runs it: pipelines.ingest, reading the DataFrame {classified_events}.
-- Parameters: none.
select
    anchor_id,
    event_type,
    xor_value,
    spout_task,
    source_msg_id,
    component,
    event_time,
    event_id
from {classified_events}
where read_problem is null and quarantine_reason is null
