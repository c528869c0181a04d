/* The end of the update to 1.3. */
