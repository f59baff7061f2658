-- Valid clicks.
select user_id, page, event_time, to_timestamp(event_time / 1000.0) as clicked_at
from {{ source('lake', 'clicks') }}
where _valid
