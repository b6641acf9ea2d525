-- set_event_time_origin.sql
-- What: records where the event_time clock's epoch 0 starts, once, on the first event-time
--       drain: the start of the tick interval holding the earliest staged event.
-- Who runs it: pipelines.event_time.
-- Parameters: :held_events (table); {{origin_us}}, microseconds since 1970, as a string (table
--             properties take no parameter marker).
alter table identifier(:held_events)
set tblproperties ('batch_acker.event_time_origin_us' = {{origin_us}})
