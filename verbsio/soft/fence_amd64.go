package soft

// storeFence orders earlier stores before later ones. On amd64 stores
// become visible in program order (and Go's memmove ends its non-temporal
// stores with SFENCE), so nothing is needed.
func storeFence() {}
