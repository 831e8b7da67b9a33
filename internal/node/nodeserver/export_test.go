package nodeserver

// PutBudgetState exposes the PUT budget to the external tests: the bytes
// held and the PUTs waiting.
func (s *Server) PutBudgetState() (used int64, waiting int) { return s.puts.state() }
