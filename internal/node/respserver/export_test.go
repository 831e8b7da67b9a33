package respserver

import "time"

// SetIdleRecheck shortens how long an idle wait lasts before it is
// re-armed; call it before Serve.
func SetIdleRecheck(s *Server, d time.Duration) { s.idleRecheck = d }

// IdleRearms counts the idle deadlines re-armed, by every connection.
func IdleRearms(s *Server) uint64 { return s.ctr.rearms.Load() }
