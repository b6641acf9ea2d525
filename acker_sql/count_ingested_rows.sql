-- count_ingested_rows.sql
-- What: how many rows of a file go to ack_events and how many to quarantine
--       (select_ingested_events.sql and select_ingest_quarantine.sql), in one read of its
--       classified rows.
-- Who runs it: pipelines.ingest, once per file, reading the DataFrame {classified_events}.
-- Parameters: none.
select
    count_if(read_problem is null and quarantine_reason is null) as ack_events,
    count_if(read_problem is not null or quarantine_reason is not null) as quarantine
from {classified_events}
