#!/usr/bin/env bash
# pgsample.sh OUT STOPFILE: pg_stat_activity every 100 ms over one connection.
while [ ! -e "$2" ]; do
  echo "select extract(epoch from clock_timestamp()), coalesce(nullif(application_name,''),backend_type), state, coalesce(wait_event_type,'-'), coalesce(wait_event,'-'), left(regexp_replace(query,'\s+',' ','g'),40) from pg_stat_activity where pid<>pg_backend_pid() and (state is distinct from 'idle' or backend_type<>'client backend');"
  sleep 0.1
done | psql -At -F'|' "host=127.0.0.1 port=25432 user=postgres dbname=postgres" > "$1" 2>&1
