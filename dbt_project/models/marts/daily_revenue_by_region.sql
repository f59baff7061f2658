-- Revenue and orders per day and region (de-duplicated orders, late ones included).
select
    cast(date_trunc('day', ordered_at) as date) as order_date,
    region,
    count(*) as order_count,
    round(sum(amount), 2) as revenue,
    round(avg(amount), 2) as average_order_value,
    count(distinct customer_id) as customers
from {{ ref('stg_orders') }}
group by 1, 2
