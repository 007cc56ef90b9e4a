// Package bearer reads the token of an `Authorization: Bearer <token>` header, the one
// way agenticd's API and its metrics endpoint take a token.
package bearer

import "strings"

// Token is the token an Authorization header's value carries, and whether the value
// names the Bearer scheme at all. The scheme is case-insensitive (RFC 6750 via RFC 9110
// section 11.1) and the spaces after it are not part of the token.
func Token(authorization string) (string, bool) {
	scheme, token, _ := strings.Cut(authorization, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(token, " "), true
}
