-- input_contract.sql
-- What: the input contract of ack_events, in one place: the reason a row must be quarantined,
--       null when it is valid; an expression over an ack_events row's columns. The acker
--       (classify_batch_events.sql) and the analyst views (tree_events, outcome_summary)
--       include it, so the views leave out exactly the rows the acker quarantines.
-- Who runs it: no one alone; a statement includes it by name (pipelines.sql.load_sql).
case
    when anchor_id is null then 'null_anchor_id'
    when anchor_id = 0 then 'zero_anchor_id'
    when event_type is null
        or event_type not in ('init', 'ack', 'anchor', 'fail', 'reset')
        then 'unknown_event_type'
    when event_type in ('init', 'ack', 'anchor') and xor_value is null then 'null_xor_value'
    when event_type in ('ack', 'anchor') and xor_value = 0 then 'zero_xor_value'
    when event_type = 'init' and spout_task is null then 'init_without_spout_task'
    when event_time is null then 'null_event_time'
end
