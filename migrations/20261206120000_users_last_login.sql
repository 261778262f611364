-- When each portal user last signed in with its password (the admin page's "last login"); NULL: never, or not
-- since this column exists.
ALTER TABLE users ADD COLUMN last_login_at timestamptz;
