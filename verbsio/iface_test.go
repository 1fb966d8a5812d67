package verbsio

import "testing"

func TestCheckQuery(t *testing.T) {
	offered := map[string]int{FamilyQPBurst: 1, FamilyWriteTurn: 2}
	tests := []struct {
		name string
		q    InterfaceQuery
		want InterfaceStatus
	}{
		{"offered", InterfaceQuery{Family: FamilyQPBurst, Version: 1}, IntfOK},
		{"older version", InterfaceQuery{Family: FamilyWriteTurn, Version: 1}, IntfOK},
		{"with checks", InterfaceQuery{Family: FamilyWriteTurn, Flags: IntfFlagEnableChecks}, IntfOK},
		{"not offered", InterfaceQuery{Family: FamilyCQPoll}, IntfNotSupported},
		{"future version", InterfaceQuery{Family: FamilyQPBurst, Version: 2}, IntfVersionNotSupported},
		{"negative version", InterfaceQuery{Family: FamilyQPBurst, Version: -1}, IntfVersionNotSupported},
		{"unknown flags", InterfaceQuery{Family: FamilyQPBurst, Flags: 1 << 5}, IntfInvalParam},
		{"vendor scope", InterfaceQuery{Scope: ScopeVendor, Family: FamilyQPBurst}, IntfVendorNotSupported},
		{"experimental scope", InterfaceQuery{Scope: ScopeExperimental, Family: FamilyQPBurst}, IntfNotSupported},
	}
	for _, tt := range tests {
		if got := CheckQuery(tt.q, offered); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
