-- select_ingest_quarantine.sql
-- What: the rows of one input file that cannot be read or break the input contract, as text
--       exactly as in the file, with the file, the line (or Parquet row) number and the reason.
-- Who runs it: pipelines.ingest, reading the DataFrame {classified_events}.
-- Parameters: :source, the file's path.
select
    source_text as raw,
    coalesce(read_problem, quarantine_reason) as reason,
    cast(:source as string) as source,
    source_row,
    cast(null as bigint) as batch_id,
    current_timestamp() as quarantined_at
from {classified_events}
where read_problem is not null or quarantine_reason is not null
