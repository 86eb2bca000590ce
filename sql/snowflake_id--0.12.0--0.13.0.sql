-- snowflake_id 0.12.0 → 0.13.0: the extension directory made visible.
--
-- snowflake_directory() shows the server's extension directory (docs/design.md §6) per
-- database: whether its entry is current, the layouts it holds, the lookups it answered and
-- those that read the catalogs instead, and why it is off, if it is. Nothing else in the
-- database changes; every sequence, ID and floor is kept.

CREATE FUNCTION snowflake_directory() RETURNS TABLE (
    database_oid oid,
    database text,
    current boolean,
    layouts integer,
    answered bigint,
    looked_up bigint,
    off text
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_directory_wrapper';

-- Its privileges as the install script leaves every function's (docs/reference.md,
-- "Privileges"): EXECUTE for everybody, whatever default privileges granted besides.
DO $documented_privileges$
DECLARE
    function_oid oid := '@extschema@.snowflake_directory()'::pg_catalog.regprocedure;
    owner_name text;
    grantee_name text;
BEGIN
    SELECT pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(p.proowner)) INTO owner_name
      FROM pg_catalog.pg_proc AS p WHERE p.oid OPERATOR(pg_catalog.=) function_oid;
    FOR grantee_name IN
        SELECT 'PUBLIC'
        UNION
        SELECT owner_name
        UNION
        SELECT pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee))
          FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
         WHERE p.oid OPERATOR(pg_catalog.=) function_oid
           AND a.grantee OPERATOR(pg_catalog.<>) 0
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %s CASCADE',
                                  function_oid::pg_catalog.regprocedure, grantee_name);
    END LOOP;
    EXECUTE pg_catalog.format('GRANT ALL ON FUNCTION %s TO %s',
                              function_oid::pg_catalog.regprocedure, owner_name);
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC',
                              function_oid::pg_catalog.regprocedure);
END
$documented_privileges$;
