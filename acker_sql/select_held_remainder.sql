-- select_held_remainder.sql
-- What: the staged rows a slice leaves: those held_slice_rows.sql does not name, as
--       delete_held_slice.sql leaves them in held_events.
-- Who runs it: pipelines.clock, over a stream batch's rows kept in memory while a drain applies
--              them as they arrive (:held_events names their view).
-- Parameters: as held_slice_rows.sql.
select *
from identifier(:held_events)
where not coalesce({{include held_slice_rows}}, false)
