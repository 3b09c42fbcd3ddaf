#!/usr/bin/env bash
# The Postgres role onceflow connects as: NOT a superuser, owner of the onceflow database and of
# everything in its public schema, so migrations run as it and nothing else is in its reach (no
# other database's tables, no COPY ... PROGRAM, no server files). The superuser's password stays
# with Postgres and the operator.
#
# docker compose runs it once, from /docker-entrypoint-initdb.d, when the Postgres volume is first
# initialised. For an existing database (an install from before this script, Kubernetes, a managed
# Postgres) run it once by hand as a superuser or the database owner; it is idempotent and takes
# over the tables a previous superuser-run onceflow created:
#   PGHOST=db.example.internal POSTGRES_USER=postgres POSTGRES_DB=onceflow \
#   ONCEFLOW_DB_PASSWORD="$(openssl rand -hex 24)" deploy/postgres/10-onceflow-app-role.sh
# Needs psql >= 15 (\getenv keeps the password off psql's command line).
#   POSTGRES_USER, POSTGRES_DB   who runs this, and the database (set by the postgres image)
#   ONCEFLOW_DB_USER             the app's role (default onceflow_app)
#   ONCEFLOW_DB_PASSWORD         its password (required; use URL-safe characters: it goes into DATABASE_URL)
set -euo pipefail
: "${ONCEFLOW_DB_PASSWORD:?set ONCEFLOW_DB_PASSWORD (the password of the onceflow Postgres role)}"
export ONCEFLOW_DB_USER="${ONCEFLOW_DB_USER:-onceflow_app}"

psql -v ON_ERROR_STOP=1 --no-psqlrc --quiet --username "${POSTGRES_USER:-postgres}" --dbname "${POSTGRES_DB:-onceflow}" <<'SQL'
\getenv app_user ONCEFLOW_DB_USER
\getenv app_password ONCEFLOW_DB_PASSWORD
SELECT format('CREATE ROLE %I NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', :'app_user')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'app_user') \gexec
-- An existing role that holds more loses it (that takes a superuser: elsewhere this fails, loudly).
SELECT format('ALTER ROLE %I NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', rolname) FROM pg_roles
 WHERE rolname = :'app_user' AND (rolsuper OR rolcreatedb OR rolcreaterole OR rolreplication OR rolbypassrls) \gexec
ALTER ROLE :"app_user" WITH LOGIN PASSWORD :'app_password';
-- A managed service's admin is no superuser: handing objects to a role needs membership in it.
SELECT format('GRANT %I TO CURRENT_USER', :'app_user') WHERE NOT pg_has_role(current_user, :'app_user', 'MEMBER') \gexec
SELECT format('ALTER DATABASE %I OWNER TO %I', current_database(), :'app_user') \gexec
-- Postgres 15+: public belongs to pg_database_owner, i.e. now to the app role. Older servers:
-- hand it over when this user may.
SELECT format('ALTER SCHEMA public OWNER TO %I', :'app_user') FROM pg_namespace
 WHERE nspname = 'public' AND pg_get_userbyid(nspowner) <> 'pg_database_owner' AND pg_has_role(current_user, nspowner, 'USAGE') \gexec
-- What an earlier onceflow created as the superuser. ALTER TABLE also moves the sequences its
-- columns own (run_events.id), and the indexes and constraints go with their table.
SELECT format('ALTER TABLE public.%I OWNER TO %I', tablename, :'app_user') FROM pg_tables WHERE schemaname = 'public' \gexec
SELECT format('ALTER SEQUENCE public.%I OWNER TO %I', c.relname, :'app_user')
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'public' AND c.relkind = 'S'
   AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i')) \gexec
SQL
echo "onceflow: role ${ONCEFLOW_DB_USER} owns database ${POSTGRES_DB:-onceflow}"
