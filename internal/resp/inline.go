package resp

// split splits an inline command line into arguments appended to the
// arena, as Redis's sdssplitargs does (see the package comment). The line
// holds no NUL (findLine stops there), so the end of the line plays the
// part of C's terminating NUL.
func (r *Reader) split(line []byte) error {
	at := func(i int) byte {
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p == len(line) {
			return nil
		}
		inq, insq := false, false
		for done := false; !done; {
			c := at(p)
			switch {
			case inq:
				switch {
				case c == '\\' && at(p+1) == 'x' && isHex(at(p+2)) && isHex(at(p+3)):
					r.arena = append(r.arena, unhex(at(p+2))<<4|unhex(at(p+3)))
					p += 3
				case c == '\\' && at(p+1) != 0:
					p++
					r.arena = append(r.arena, unescape(at(p)))
				case c == '"':
					// A closing quote is followed by a blank or the end.
					if n := at(p + 1); n != 0 && !isSpace(n) {
						return protoErr(msgUnbalancedQts)
					}
					done = true
				case c == 0:
					return protoErr(msgUnbalancedQts)
				default:
					r.arena = append(r.arena, c)
				}
			case insq:
				switch {
				case c == '\\' && at(p+1) == '\'':
					p++
					r.arena = append(r.arena, '\'')
				case c == '\'':
					if n := at(p + 1); n != 0 && !isSpace(n) {
						return protoErr(msgUnbalancedQts)
					}
					done = true
				case c == 0:
					return protoErr(msgUnbalancedQts)
				default:
					r.arena = append(r.arena, c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0: // not \v or \f: Redis's list
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					r.arena = append(r.arena, c)
				}
			}
			if p < len(line) {
				p++
			}
		}
		if err := r.growEnds(1); err != nil {
			return err
		}
		r.ends = append(r.ends, len(r.arena))
	}
}

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}

// unescape is the byte a backslash escape in double quotes stands for.
func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}
