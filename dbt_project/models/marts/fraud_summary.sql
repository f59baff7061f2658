-- Alerts per day and rule: how many, for how many customers, over how much money.
select
    cast(date_trunc('day', alerted_at) as date) as alert_date,
    rule,
    count(*) as alerts,
    count(distinct customer_id) as customers,
    round(coalesce(sum(amount), 0), 2) as amount_flagged
from {{ ref('stg_fraud_alerts') }}
group by 1, 2
