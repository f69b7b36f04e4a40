package dockerctx

// The functions below act on the store the docker CLI itself uses
// ($DOCKER_CONFIG or ~/.docker).

// Ensure creates or updates context name in the default store.
func Ensure(name, host, description string) error {
	s, err := Default()
	if err != nil {
		return err
	}
	return s.Ensure(name, host, description)
}

// Current is the default store's current context ("default" when unset).
func Current() string {
	s, err := Default()
	if err != nil {
		return DefaultName
	}
	return s.Current()
}

// Use makes name current in the default store.
func Use(name string) error {
	s, err := Default()
	if err != nil {
		return err
	}
	return s.Use(name)
}

// Remove deletes context name from the default store.
func Remove(name string) error {
	s, err := Default()
	if err != nil {
		return err
	}
	return s.Remove(name)
}

// Exists reports whether context name is in the default store.
func Exists(name string) bool {
	s, err := Default()
	if err != nil {
		return name == DefaultName
	}
	return s.Exists(name)
}

// Activate makes name current in the default store and returns the
// context to hand to Restore later.
func Activate(name string) (previous string, err error) {
	s, err := Default()
	if err != nil {
		return "", err
	}
	return s.Activate(name)
}

// Restore switches the default store back to previous while ours is
// still current.
func Restore(previous, ours string) error {
	s, err := Default()
	if err != nil {
		return err
	}
	return s.Restore(previous, ours)
}
