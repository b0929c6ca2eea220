; Order up to 20 units of every item below the threshold
section .rodata
    items     dd apples, pears, milk
    apples    db "apples", 0
    pears     db "pears", 0
    milk      db "milk", 0
    threshold dd 10
section .data
    ordered   dd 0
section .text
    xor esi, esi
check_item:
    push dword [items + esi*4]
    call get_stock
    cmp eax, [threshold]
    jae enough
    mov ebx, 20
    sub ebx, eax                  ; units missing
    push dword [items + esi*4]
    push ebx
    call order
    inc dword [ordered]
enough:
    inc esi
    cmp esi, 3
    jb check_item
